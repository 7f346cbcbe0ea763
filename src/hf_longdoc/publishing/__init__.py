"""Model cards and the Hub upload."""

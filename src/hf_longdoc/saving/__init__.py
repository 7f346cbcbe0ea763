"""What is written to disk and read back: run folders (manifests, locks) and saved models."""

"""Reading saved models: the settings `predict` and `serve` share (`settings`), and the one way to open a saved model
folder for reading (`reader.load_reader`), under `predict`, the server and `evaluate`."""

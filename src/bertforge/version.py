"""bertforge's version, in a module of its own so that any layer can name it without importing the package's
public API (which re-exports the model)."""
__version__ = "0.1.0"

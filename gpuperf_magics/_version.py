"""The package's version, in a module of its own: the store records it in every new store, and
must not import the package root (whose lazy names reach the magics) to read it."""

__version__ = "0.1.0"

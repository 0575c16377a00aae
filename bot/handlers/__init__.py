"""Small event handlers, one module per event family."""

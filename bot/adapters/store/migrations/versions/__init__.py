"""One module per schema revision (see ``bot.adapters.store.migrations``)."""

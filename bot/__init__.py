"""threshold-bot: reviews pull requests that change CI regression thresholds."""

__version__ = "0.1.0"

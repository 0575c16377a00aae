"""Plain-text golden files (``golden.text``) and what the scripts reading them compare
(``golden.readers``)."""

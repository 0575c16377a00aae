"""The review as people read it: PR comment, check-run output, JSON and terminal table."""

"""Gates in shell scripts, lexed (never executed): ``script.parse_shell``."""

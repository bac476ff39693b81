"""The project the README's ``myproject/agents.py`` example belongs to."""

"""Runnable agents traced by agenttrace (not shipped in the wheel): ``examples.cafe`` is the cafe
scenario of docs/responsibility.md, ``make demo``, and the agent factory ``agenttrace resume``
can rebuild."""

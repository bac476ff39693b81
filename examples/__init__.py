"""Runnable agents traced by agenttrace (not shipped in the wheel): ``examples.cafe`` is seed
001's cafe scenario, ``make demo``, and the agent factory ``agenttrace resume`` can rebuild."""

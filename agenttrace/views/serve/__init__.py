"""``agenttrace serve``: a local web app that lists the sessions of a sessions directory and
follows one live (docs/serve.md). Needs the ``[serve]`` extra; :mod:`.app` builds it."""

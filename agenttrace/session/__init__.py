"""The session agent code is recorded in: its agents and transcripts (``state``), restored from
its files by ``restore`` (``resume``, ``load_session``)."""

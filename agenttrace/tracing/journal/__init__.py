"""The step journal's writers (docs/journal.md): a tool call's steps (``steps.py``), an LLM
attempt's (``llm_steps.py``), what a re-entered run's decorated function does with a step the
journal answers (``step_guard.py``), a framework tool's effect class (``effects.py``) and how a
recorded result is given back (``tool_results.py``). The lines they write are defined in
:mod:`agenttrace.model.journal_lines`. A root run's own lines are written by
``agenttrace.tracing.run_journal``, outside this folder: the scopes that start runs import it,
and this folder imports the scopes."""

"""`co serve`: co as a local HTTP server, a second front end beside ``terminal/``.

The OpenAI chat-completions API (``openai_api.py``) and the browser view run every request through the same
session machinery the REPL uses (``chats.py``), on the same database. Nothing below this package imports it,
and it never imports the terminal's libraries; its own (Starlette, uvicorn) are imported only here, and only
when `co serve` runs.
"""

"""The terminal: the only package that draws, reads keys or parses argv (rich, prompt_toolkit, typer).

Nothing is imported here, so ``co --help`` loads only the command line (``terminal.cli``).
"""

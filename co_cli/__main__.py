from co_cli.terminal.cli import main

main()

from co_cli.cli import main

main()

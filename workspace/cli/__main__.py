from workspace.cli.main import main

main()

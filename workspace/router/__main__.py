from workspace.router.app import main

main()

from workspace.service.app import main

main()

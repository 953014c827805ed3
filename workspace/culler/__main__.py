from workspace.culler.app import main

main()

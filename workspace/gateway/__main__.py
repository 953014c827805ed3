from workspace.gateway.server import main

main()

from orchestrator.client.cli import main

main()

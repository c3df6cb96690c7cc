from markerstore.cli.main import main

main()

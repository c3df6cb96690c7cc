from markerstore.cli.launch import markerstore

markerstore()

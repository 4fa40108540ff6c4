"""The `posexport` command: a thin typer layer over the library (the library never imports it)."""

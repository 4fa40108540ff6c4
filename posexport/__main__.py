"""`python -m posexport`: the `posexport` command. Only this module imports the CLI; `import posexport` never does."""

from posexport_cli.main import main

main()

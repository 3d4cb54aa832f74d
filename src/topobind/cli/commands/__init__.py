"""CLI subcommands: parse, call the engine, print. No logic of their own."""

"""The experimenter's side: ask and intervene (the helper, its tools and prompts, consult), interviews, profile filters."""

__all__: list[str] = []  # import from the modules; engine.society re-exports the public names

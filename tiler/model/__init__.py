"""Physics shared by every operator's model: the estimate record, roofline and bandwidth mixing (`common`), and
the multi-core schedule with its L2 walk (`schedule`). Operator models live in `tiler/ops/<op>/`; nothing here
reads files, imports optuna or knows the CLI."""

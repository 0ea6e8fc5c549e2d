"""The rule author's and user's tools behind `rulec run`, `rulec trace` and `rulec stats`: each runs an
ordinary Python script that uses `rulec.Tensor`, with a trace or a watcher installed, and reports."""

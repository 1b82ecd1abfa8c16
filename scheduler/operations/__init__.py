"""Operator repairs: the workers' own fenced statements, run on an operator's word, each leaving an audit row."""

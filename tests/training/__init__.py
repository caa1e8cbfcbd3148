"""Real multi-rank RETURNN CPU trainings (the harness) and their tests."""

"""Real-process harness: lay out and run local clusters, inject faults, check histories."""

"""ipywidgets views over the engine public API: see the widgets issue."""

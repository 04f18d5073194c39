"""The composition root: builds the manager, the controllers and the chosen provider
from one Options value. Filled in by the core-loop work."""

"""The REST adapter: one module per resource, each a list of :class:`~ipintel.api.rest.endpoint.Endpoint`
declarations whose handlers read parameters and call one ``Intel`` method; ``openapi`` builds the document
from them (docs/ARCHITECTURE.md)."""

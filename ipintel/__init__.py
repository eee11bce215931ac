"""ipintel: a self-hosted IP-intelligence service (GeoIP, VPN detection, RDAP, DNS, DNSBL, CIDR)."""

__version__ = "0.1.0"

"""Active probes along each link: TWAMP-light and ICMP round trips, exported per link."""

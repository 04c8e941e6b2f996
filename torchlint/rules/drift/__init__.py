"""TL6xx: API drift across torch releases (removed, deprecated and changed APIs)."""

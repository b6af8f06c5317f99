"""The store: the only place with SQL (SQLAlchemy Core over SQLite or PostgreSQL)."""

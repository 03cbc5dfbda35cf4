from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture

__all__ = ["postgres_dsn_fixture", "postgres_server_fixture"]

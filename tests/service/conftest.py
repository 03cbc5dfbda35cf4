from service.replica_helpers import empty_database_fixture
from support.postgres_server import postgres_dsn_fixture, postgres_server_fixture

__all__ = ["empty_database_fixture", "postgres_dsn_fixture", "postgres_server_fixture"]

package hs2

import (
	"context"
	"strings"

	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// The metadata calls are answered by queries on the engine's
// information_schema, with the result columns JDBC's DatabaseMetaData
// names (which is what HiveServer2 returns).

// pattern turns an optional HiveServer2 search pattern into a LIKE
// pattern: no pattern (or "*", which Hive accepts too) matches everything.
// Hive matches its metastore with regular expressions, and impyla sends
// ".*" for "any": that is "%" here too.
func pattern[S ~string](p *S) string {
	if p == nil || *p == "" {
		return "%"
	}
	return strings.ReplaceAll(strings.ReplaceAll(string(*p), ".*", "%"), "*", "%")
}

// ident turns an optional identifier (JDBC: null does not narrow the
// search) into a LIKE pattern matching it exactly.
func ident(p *tcli.TIdentifier) string {
	if p == nil || *p == "" {
		return "%"
	}
	return likeEscaper.Replace(string(*p))
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

func (h *Handler) metaOp(sh *tcli.TSessionHandle, typ tcli.TOperationType, query string, args ...any) (*tcli.TStatus, *tcli.TOperationHandle) {
	s, err := h.session(sh)
	if err != nil {
		return statusOf(err), nil
	}
	op, err := h.newOp(s, typ, query, args...)
	if err != nil {
		return statusOf(err), nil
	}
	return okStatus(), op.handle()
}

func (h *Handler) GetCatalogs(ctx context.Context, req *tcli.TGetCatalogsReq) (*tcli.TGetCatalogsResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_CATALOGS,
		`SELECT DISTINCT catalog_name AS "TABLE_CAT" FROM information_schema.schemata ORDER BY 1`)
	return &tcli.TGetCatalogsResp{Status: st, OperationHandle: oh}, nil
}

func (h *Handler) GetSchemas(ctx context.Context, req *tcli.TGetSchemasReq) (*tcli.TGetSchemasResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_SCHEMAS,
		`SELECT schema_name AS "TABLE_SCHEM", catalog_name AS "TABLE_CATALOG"
		   FROM information_schema.schemata
		  WHERE catalog_name LIKE ? ESCAPE '\' AND schema_name LIKE ? ESCAPE '\'
		  ORDER BY 2, 1`, pattern(req.CatalogName), pattern(req.SchemaName))
	return &tcli.TGetSchemasResp{Status: st, OperationHandle: oh}, nil
}

func (h *Handler) GetTables(ctx context.Context, req *tcli.TGetTablesReq) (*tcli.TGetTablesResp, error) {
	types := req.TableTypes
	if len(types) == 0 {
		types = []string{"TABLE", "VIEW", "BASE TABLE", "LOCAL TEMPORARY"}
	}
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_TABLES,
		`SELECT table_catalog AS "TABLE_CAT", table_schema AS "TABLE_SCHEM", table_name AS "TABLE_NAME",
		        CASE table_type WHEN 'BASE TABLE' THEN 'TABLE' ELSE table_type END AS "TABLE_TYPE",
		        '' AS "REMARKS"
		   FROM information_schema.tables
		  WHERE table_catalog LIKE ? ESCAPE '\' AND table_schema LIKE ? ESCAPE '\'
		    AND table_name LIKE ? ESCAPE '\'
		    AND (list_contains(?::VARCHAR[], table_type) OR list_contains(?::VARCHAR[], CASE table_type WHEN 'BASE TABLE' THEN 'TABLE' ELSE table_type END))
		  ORDER BY 4, 1, 2, 3`,
		pattern(req.CatalogName), pattern(req.SchemaName), pattern(req.TableName), types, types)
	return &tcli.TGetTablesResp{Status: st, OperationHandle: oh}, nil
}

func (h *Handler) GetTableTypes(ctx context.Context, req *tcli.TGetTableTypesReq) (*tcli.TGetTableTypesResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_TABLE_TYPES,
		`SELECT * FROM (VALUES ('TABLE'), ('VIEW')) t("TABLE_TYPE") ORDER BY 1`)
	return &tcli.TGetTableTypesResp{Status: st, OperationHandle: oh}, nil
}

// GetColumns answers JDBC's getColumns columns; DATA_TYPE holds the
// java.sql.Types code of the column's type.
func (h *Handler) GetColumns(ctx context.Context, req *tcli.TGetColumnsReq) (*tcli.TGetColumnsResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_COLUMNS,
		`SELECT table_catalog AS "TABLE_CAT", table_schema AS "TABLE_SCHEM", table_name AS "TABLE_NAME",
		        column_name AS "COLUMN_NAME",
		        CASE WHEN data_type = 'BOOLEAN' THEN 16 WHEN data_type = 'TINYINT' THEN -6
		             WHEN data_type = 'SMALLINT' THEN 5 WHEN data_type = 'INTEGER' THEN 4
		             WHEN data_type = 'BIGINT' THEN -5 WHEN data_type = 'FLOAT' THEN 6
		             WHEN data_type = 'DOUBLE' THEN 8 WHEN data_type LIKE 'DECIMAL%' THEN 3
		             WHEN data_type = 'DATE' THEN 91 WHEN data_type LIKE 'TIMESTAMP%' THEN 93
		             WHEN data_type = 'BLOB' THEN -2 ELSE 12 END::INTEGER AS "DATA_TYPE",
		        data_type AS "TYPE_NAME",
		        COALESCE(numeric_precision, character_maximum_length)::INTEGER AS "COLUMN_SIZE",
		        NULL::TINYINT AS "BUFFER_LENGTH",
		        numeric_scale::INTEGER AS "DECIMAL_DIGITS",
		        numeric_precision_radix::INTEGER AS "NUM_PREC_RADIX",
		        CASE is_nullable WHEN 'YES' THEN 1 ELSE 0 END::INTEGER AS "NULLABLE",
		        '' AS "REMARKS", column_default AS "COLUMN_DEF",
		        NULL::INTEGER AS "SQL_DATA_TYPE", NULL::INTEGER AS "SQL_DATETIME_SUB",
		        NULL::INTEGER AS "CHAR_OCTET_LENGTH",
		        ordinal_position::INTEGER AS "ORDINAL_POSITION", is_nullable AS "IS_NULLABLE",
		        NULL::VARCHAR AS "SCOPE_CATALOG", NULL::VARCHAR AS "SCOPE_SCHEMA", NULL::VARCHAR AS "SCOPE_TABLE",
		        NULL::SMALLINT AS "SOURCE_DATA_TYPE", 'NO' AS "IS_AUTO_INCREMENT"
		   FROM information_schema.columns
		  WHERE table_catalog LIKE ? ESCAPE '\' AND table_schema LIKE ? ESCAPE '\'
		    AND table_name LIKE ? ESCAPE '\' AND column_name LIKE ? ESCAPE '\'
		  ORDER BY 1, 2, 3, ordinal_position`,
		pattern(req.CatalogName), pattern(req.SchemaName), pattern(req.TableName), pattern(req.ColumnName))
	return &tcli.TGetColumnsResp{Status: st, OperationHandle: oh}, nil
}

// GetTypeInfo answers JDBC's getTypeInfo columns (HiveServer2's types
// for them) for the types the server maps to its own columns (rowset.go),
// ordered by DATA_TYPE as JDBC asks.
func (h *Handler) GetTypeInfo(ctx context.Context, req *tcli.TGetTypeInfoReq) (*tcli.TGetTypeInfoResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_TYPE_INFO,
		`SELECT "TYPE_NAME", "DATA_TYPE"::INTEGER AS "DATA_TYPE", "PRECISION"::INTEGER AS "PRECISION",
		        "LITERAL_PREFIX"::VARCHAR AS "LITERAL_PREFIX", "LITERAL_SUFFIX"::VARCHAR AS "LITERAL_SUFFIX",
		        "CREATE_PARAMS"::VARCHAR AS "CREATE_PARAMS", 1::SMALLINT AS "NULLABLE",
		        "TYPE_NAME" = 'VARCHAR' AS "CASE_SENSITIVE", 3::SMALLINT AS "SEARCHABLE",
		        false AS "UNSIGNED_ATTRIBUTE", "TYPE_NAME" = 'DECIMAL' AS "FIXED_PREC_SCALE", false AS "AUTO_INCREMENT",
		        "TYPE_NAME" AS "LOCAL_TYPE_NAME", 0::SMALLINT AS "MINIMUM_SCALE", "MAXIMUM_SCALE"::SMALLINT AS "MAXIMUM_SCALE",
		        NULL::INTEGER AS "SQL_DATA_TYPE", NULL::INTEGER AS "SQL_DATETIME_SUB", "NUM_PREC_RADIX"::INTEGER AS "NUM_PREC_RADIX"
		   FROM (VALUES
		        ('TINYINT', -6, 3, NULL, NULL, NULL, 0, 10),
		        ('BIGINT', -5, 19, NULL, NULL, NULL, 0, 10),
		        ('BLOB', -2, NULL, '''', '''::BLOB', NULL, 0, NULL),
		        ('DECIMAL', 3, 38, NULL, NULL, 'precision,scale', 38, 10),
		        ('INTEGER', 4, 10, NULL, NULL, NULL, 0, 10),
		        ('SMALLINT', 5, 5, NULL, NULL, NULL, 0, 10),
		        ('FLOAT', 6, 24, NULL, NULL, NULL, 0, 2),
		        ('DOUBLE', 8, 53, NULL, NULL, NULL, 0, 2),
		        ('VARCHAR', 12, NULL, '''', '''', NULL, 0, NULL),
		        ('BOOLEAN', 16, NULL, NULL, NULL, NULL, 0, NULL),
		        ('DATE', 91, 10, 'DATE ''', '''', NULL, 0, NULL),
		        ('TIMESTAMP', 93, 26, 'TIMESTAMP ''', '''', NULL, 6, NULL))
		        t("TYPE_NAME", "DATA_TYPE", "PRECISION", "LITERAL_PREFIX", "LITERAL_SUFFIX", "CREATE_PARAMS", "MAXIMUM_SCALE", "NUM_PREC_RADIX")
		  ORDER BY 2`)
	return &tcli.TGetTypeInfoResp{Status: st, OperationHandle: oh}, nil
}

// GetFunctions answers JDBC's getFunctions columns from DuckDB's catalog
// of functions, one row per name and kind (DuckDB lists each overload):
// FUNCTION_TYPE 2 (functionReturnsTable) for table functions, else 1
// (functionNoTable).
func (h *Handler) GetFunctions(ctx context.Context, req *tcli.TGetFunctionsReq) (*tcli.TGetFunctionsResp, error) {
	fn := req.FunctionName
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_FUNCTIONS,
		`SELECT database_name AS "FUNCTION_CAT", schema_name AS "FUNCTION_SCHEM", function_name AS "FUNCTION_NAME",
		        COALESCE(first(description ORDER BY description NULLS LAST), '') AS "REMARKS",
		        (CASE WHEN function_type IN ('table', 'table_macro') THEN 2 ELSE 1 END)::INTEGER AS "FUNCTION_TYPE",
		        function_name AS "SPECIFIC_NAME"
		   FROM duckdb_functions()
		  WHERE database_name LIKE ? ESCAPE '\' AND schema_name LIKE ? ESCAPE '\'
		    AND function_name LIKE ? ESCAPE '\'
		  GROUP BY 1, 2, 3, 5
		  ORDER BY 1, 2, 3, 5`,
		ident(req.CatalogName), pattern(req.SchemaName), pattern(&fn))
	return &tcli.TGetFunctionsResp{Status: st, OperationHandle: oh}, nil
}

// GetPrimaryKeys answers JDBC's getPrimaryKeys columns from DuckDB's
// constraints (TPC-H's tables, as dbgen makes them, declare none). The
// operation's type is GET_FUNCTIONS, as HiveServer2's own (the enum has
// none for it).
func (h *Handler) GetPrimaryKeys(ctx context.Context, req *tcli.TGetPrimaryKeysReq) (*tcli.TGetPrimaryKeysResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_FUNCTIONS,
		`SELECT database_name AS "TABLE_CAT", schema_name AS "TABLE_SCHEM", table_name AS "TABLE_NAME",
		        constraint_column_names[k] AS "COLUMN_NAME", k::INTEGER AS "KEY_SEQ", constraint_name AS "PK_NAME"
		   FROM duckdb_constraints(), range(1, len(constraint_column_names) + 1) r(k)
		  WHERE constraint_type = 'PRIMARY KEY'
		    AND database_name LIKE ? ESCAPE '\' AND schema_name LIKE ? ESCAPE '\' AND table_name LIKE ? ESCAPE '\'
		  ORDER BY 1, 2, 3, 5`,
		ident(req.CatalogName), ident(req.SchemaName), ident(req.TableName))
	return &tcli.TGetPrimaryKeysResp{Status: st, OperationHandle: oh}, nil
}

// GetCrossReference answers JDBC's getCrossReference columns: the
// foreign keys of the foreign table that reference the parent table
// (DuckDB's referenced table is in the foreign key's schema). DuckDB
// checks references on every change: UPDATE_RULE and DELETE_RULE are
// importedKeyNoAction (3), DEFERRABILITY importedKeyNotDeferrable (7).
func (h *Handler) GetCrossReference(ctx context.Context, req *tcli.TGetCrossReferenceReq) (*tcli.TGetCrossReferenceResp, error) {
	st, oh := h.metaOp(req.SessionHandle, tcli.TOperationType_GET_FUNCTIONS,
		`SELECT f.database_name AS "PKTABLE_CAT", f.schema_name AS "PKTABLE_SCHEM", f.referenced_table AS "PKTABLE_NAME",
		        f.referenced_column_names[k] AS "PKCOLUMN_NAME",
		        f.database_name AS "FKTABLE_CAT", f.schema_name AS "FKTABLE_SCHEM", f.table_name AS "FKTABLE_NAME",
		        f.constraint_column_names[k] AS "FKCOLUMN_NAME", k::SMALLINT AS "KEY_SEQ",
		        3::SMALLINT AS "UPDATE_RULE", 3::SMALLINT AS "DELETE_RULE", f.constraint_name AS "FK_NAME",
		        p.constraint_name AS "PK_NAME", 7::SMALLINT AS "DEFERRABILITY"
		   FROM duckdb_constraints() f
		   JOIN range(1, 1000) r(k) ON k <= len(f.constraint_column_names)
		   LEFT JOIN duckdb_constraints() p
		     ON p.constraint_type = 'PRIMARY KEY' AND p.database_name = f.database_name
		    AND p.schema_name = f.schema_name AND p.table_name = f.referenced_table
		  WHERE f.constraint_type = 'FOREIGN KEY'
		    AND f.database_name LIKE ? ESCAPE '\' AND f.schema_name LIKE ? ESCAPE '\' AND f.referenced_table LIKE ? ESCAPE '\'
		    AND f.database_name LIKE ? ESCAPE '\' AND f.schema_name LIKE ? ESCAPE '\' AND f.table_name LIKE ? ESCAPE '\'
		  ORDER BY 5, 6, 7, 9`,
		ident(req.ParentCatalogName), ident(req.ParentSchemaName), ident(req.ParentTableName),
		ident(req.ForeignCatalogName), ident(req.ForeignSchemaName), ident(req.ForeignTableName))
	return &tcli.TGetCrossReferenceResp{Status: st, OperationHandle: oh}, nil
}

func (h *Handler) GetDelegationToken(ctx context.Context, req *tcli.TGetDelegationTokenReq) (*tcli.TGetDelegationTokenResp, error) {
	return &tcli.TGetDelegationTokenResp{Status: unsupported("delegation tokens")}, nil
}

func (h *Handler) CancelDelegationToken(ctx context.Context, req *tcli.TCancelDelegationTokenReq) (*tcli.TCancelDelegationTokenResp, error) {
	return &tcli.TCancelDelegationTokenResp{Status: unsupported("delegation tokens")}, nil
}

func (h *Handler) RenewDelegationToken(ctx context.Context, req *tcli.TRenewDelegationTokenReq) (*tcli.TRenewDelegationTokenResp, error) {
	return &tcli.TRenewDelegationTokenResp{Status: unsupported("delegation tokens")}, nil
}

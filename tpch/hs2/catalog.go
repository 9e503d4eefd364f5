package hs2

import (
	"context"

	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
)

// The metadata calls are answered by queries on the engine's
// information_schema, with the result columns JDBC's DatabaseMetaData
// names (which is what HiveServer2 returns).

// pattern turns an optional HiveServer2 search pattern into a LIKE
// pattern: no pattern (or "*", which Hive accepts too) matches everything.
func pattern[S ~string](p *S) string {
	if p == nil || *p == "" || *p == "*" {
		return "%"
	}
	return string(*p)
}

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

func (h *Handler) GetTypeInfo(ctx context.Context, req *tcli.TGetTypeInfoReq) (*tcli.TGetTypeInfoResp, error) {
	return &tcli.TGetTypeInfoResp{Status: unsupported("GetTypeInfo")}, nil
}

func (h *Handler) GetFunctions(ctx context.Context, req *tcli.TGetFunctionsReq) (*tcli.TGetFunctionsResp, error) {
	return &tcli.TGetFunctionsResp{Status: unsupported("GetFunctions")}, nil
}

func (h *Handler) GetPrimaryKeys(ctx context.Context, req *tcli.TGetPrimaryKeysReq) (*tcli.TGetPrimaryKeysResp, error) {
	return &tcli.TGetPrimaryKeysResp{Status: unsupported("GetPrimaryKeys")}, nil
}

func (h *Handler) GetCrossReference(ctx context.Context, req *tcli.TGetCrossReferenceReq) (*tcli.TGetCrossReferenceResp, error) {
	return &tcli.TGetCrossReferenceResp{Status: unsupported("GetCrossReference")}, nil
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

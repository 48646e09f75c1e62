package lancedb

import "github.com/compactord/compactord/internal/testing/s3server"

// S3 returns the database URI and LanceDB storage options for prefix in a
// loopback versitygw (s3server.Start): path-style, plain HTTP, the
// harness's fixed test credentials.
func S3(srv *s3server.Server, prefix string) (uri string, storageOptions map[string]string) {
	return "s3://" + srv.Bucket + "/" + prefix, map[string]string{
		"endpoint":                     srv.Endpoint,
		"allow_http":                   "true",
		"region":                       s3server.Region,
		"aws_access_key_id":            s3server.AccessKey,
		"aws_secret_access_key":        s3server.SecretKey,
		"virtual_hosted_style_request": "false",
	}
}

//go:build tools

package main
import (
 _ "github.com/fsnotify/fsnotify"
 _ "github.com/mark3labs/mcp-go/server"
 _ "github.com/mark3labs/mcp-go/client"
 _ "github.com/jackc/pgx/v5"
 _ "github.com/jackc/pgx/v5/pgxpool"
 _ "github.com/spf13/viper"
 _ "modernc.org/sqlite"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "golang.org/x/sync/errgroup"
 _ "golang.org/x/tools/txtar"
 _ "github.com/spf13/cobra"
)
func main(){}

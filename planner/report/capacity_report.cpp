// Scaffolding: replaced in this issue.
namespace lcm {}
